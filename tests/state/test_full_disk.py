"""A full disk under the embedded state, on a small tmpfs mounted for the test (skipped where none can be mounted):
every refused write changes nothing, every acknowledged one survives a reopening."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.state.artifacts import LocalArtifactStore
from service.state.errors import StorageFull
from service.state.metadata import JobKind
from service.state.sqlite import SqliteMetadataStore

from .test_metadata import PARAMS, ready_graph

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = (
        os.geteuid() == 0
        and (
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(disk)], capture_output=True)
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    filler = disk / "filler"
    stat = os.statvfs(disk)
    with open(filler, "ab") as handle:
        handle.write(b"\0" * max(stat.f_bavail * stat.f_frsize - leave, 0))
    return filler


def snapshot(store: SqliteMetadataStore) -> tuple[Any, ...]:
    """Everything a client can read back."""
    return (
        store.list_graphs(),
        store.read_updates("aaaaaaaaaaaa", 0),
        store.list_jobs(),
        store.list_versions("aaaaaaaaaaaa"),
        store.changes_since(0),
    )


def test_sqlite_refuses_whole_writes_on_a_full_disk(small_disk: Path) -> None:
    store = SqliteMetadataStore(small_disk / "grail.db")
    ready_graph(store, "aaaaaaaaaaaa")
    filler = fill(small_disk, 512 << 10)
    payload = "x" * 6000
    acknowledged: list[int] = []
    refused = 0
    head = 1
    while refused < 30:
        before = snapshot(store)
        writes = [
            lambda head=head: store.append_update("aaaaaaaaaaaa", head, payload),
            lambda n=refused: store.create_graph(f"{n:012x}", {**PARAMS, "pad": payload}),
            lambda: store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {"pad": payload}),
        ]
        try:
            result = writes[0]()
        except StorageFull:
            assert snapshot(store) == before  # nothing of the refused update
            for other in writes[1:]:
                with pytest.raises(StorageFull):
                    other()
                assert snapshot(store) == before
            refused += 1
            continue
        assert refused == 0, "an update was acknowledged after the disk filled up"
        acknowledged.append(result)
        head = result
        assert len(acknowledged) < 10_000, "the disk never filled up"
    assert acknowledged, "the disk was full before the first update"

    filler.unlink()
    head = store.append_update("aaaaaaaaaaaa", head, "{}")  # space again: writes resume where they stopped
    acknowledged.append(head)
    store.close()
    reopened = SqliteMetadataStore(small_disk / "grail.db")
    try:
        assert [row.version for row in reopened.read_updates("aaaaaaaaaaaa", 0)] == acknowledged
        assert reopened.get_graph("aaaaaaaaaaaa").head_version == head
    finally:
        reopened.close()


def test_local_artifact_publish_on_a_full_disk_leaves_nothing(small_disk: Path, tmp_path: Path) -> None:
    artifacts = LocalArtifactStore(small_disk / "data")
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "manifest.json").write_bytes(b"{}")
    (staging / "query_low.npy").write_bytes(os.urandom(1 << 20))
    filler = fill(small_disk, 300 << 10)
    with pytest.raises(StorageFull):
        artifacts.publish("aaaaaaaaaaaa", 1, staging)
    assert artifacts.versions("aaaaaaaaaaaa") == [] and not artifacts.exists("aaaaaaaaaaaa", 1)
    assert list((small_disk / "data" / "graphs" / "aaaaaaaaaaaa").iterdir()) == []  # no temporary folder
    assert (staging / "query_low.npy").stat().st_size == 1 << 20  # the caller's files untouched
    filler.unlink()
    assert artifacts.publish("aaaaaaaaaaaa", 1, staging).size_bytes == (1 << 20) + 2
    assert artifacts.fetch("aaaaaaaaaaaa", 1).name == "v1"
